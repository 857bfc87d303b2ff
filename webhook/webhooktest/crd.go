package webhooktest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/repo"
)

// crdSchema is the EurekaSyncer CRD's schema, read once from the
// generated manifest, the one the API server is given.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	schemaOnce sync.Once
	schema     crdSchema
	schemaErr  error
)

// AdmitSyncer runs the API server's own checks of a created EurekaSyncer,
// in process: the CRD's defaults, its OpenAPI schema and its CEL rules,
// with the apiextensions-apiserver code the API server runs. It returns
// the syncer as the API server would store it (defaults applied), or the
// errors kubectl apply would print. Property tests use it to tell the
// specs the API server admits from those it refuses.
func AdmitSyncer(s *v1alpha1.EurekaSyncer) (*v1alpha1.EurekaSyncer, error) {
	schemaOnce.Do(func() { schema, schemaErr = loadSchema() })
	if schemaErr != nil {
		return nil, schemaErr
	}
	s = s.DeepCopy()
	s.APIVersion, s.Kind = v1alpha1.GroupVersion.String(), "EurekaSyncer"
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	// Decoded as the API server decodes a request: whole numbers as int64,
	// which the CRD's CEL rules (type(self) == int) tell from strings.
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	delete(obj, "status")
	defaulting.Default(obj, schema.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, schema.validator)
	celErrs, _ := schema.cel.Validate(context.Background(), field.NewPath(""), schema.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	if errs = append(errs, celErrs...); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	raw, err = yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.EurekaSyncer{}
	if err := yaml.UnmarshalStrict(raw, out); err != nil {
		return nil, fmt.Errorf("decode the admitted syncer: %w", err)
	}
	return out, nil
}

func loadSchema() (crdSchema, error) {
	root, err := repo.Root()
	if err != nil {
		return crdSchema{}, fmt.Errorf("find the CRD: %w", err)
	}
	path := filepath.Join(root, "manifests", "crd", "bases", "eurekube.io_eurekasyncers.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return crdSchema{}, fmt.Errorf("read the CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return crdSchema{}, fmt.Errorf("decode %s: %w", path, err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return crdSchema{}, fmt.Errorf("convert the CRD's schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return crdSchema{}, fmt.Errorf("structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return crdSchema{}, fmt.Errorf("schema validator: %w", err)
	}
	return crdSchema{structural: structural, validator: validator, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
}
