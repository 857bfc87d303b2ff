package helmchart

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The chart renders its CRDs from copies of the generated ones; each copy
// must be the same file, and there must be one for each.
const (
	generatedCRDs = "manifests/crd/bases"
	chartCRDs     = "charts/eurekube/files"
)

func TestCRD_TheChartsCopiesAreTheGeneratedCRDs(t *testing.T) {
	generated, err := filepath.Glob(filepath.Join(tools.root, generatedCRDs, "eurekube.io_*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRD in %s (%v)", generatedCRDs, err)
	}
	copies, _ := filepath.Glob(filepath.Join(tools.root, chartCRDs, "eurekube.io_*.yaml"))
	if len(copies) != len(generated) {
		t.Errorf("the chart carries %d CRDs, make generate wrote %d: run make generate and commit", len(copies), len(generated))
	}
	for _, path := range generated {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		got, err := os.ReadFile(filepath.Join(tools.root, chartCRDs, name))
		if err != nil {
			t.Errorf("the chart lacks %s: run make generate and commit (%v)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from %s/%s (written by make generate from api/): run make generate and commit", chartCRDs, name, generatedCRDs, name)
		}
	}
}

func TestCRD_KeptOnUninstallOnlyWhenAskedAndLeftOutWhenNotInstalled(t *testing.T) {
	const policy = "helm.sh/resource-policy"
	const name = "eurekasyncers.eurekube.io"
	if p, ok := render(t, releaseNamespace, "").get(t, "CustomResourceDefinition", name).GetAnnotations()[policy]; ok {
		t.Errorf("by default the CRD has %s: %q, want none (helm uninstall removes it)", policy, p)
	}
	if p := render(t, releaseNamespace, "crds: {keep: true}\n").get(t, "CustomResourceDefinition", name).GetAnnotations()[policy]; p != "keep" {
		t.Errorf("with crds.keep the CRD has %s: %q, want keep", policy, p)
	}
	if crd := render(t, releaseNamespace, "crds: {install: false}\n").find("CustomResourceDefinition", name); crd != nil {
		t.Errorf("with crds.install false the chart still renders %s", key(crd))
	}
}
