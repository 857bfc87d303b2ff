package helmchart

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The chart renders its CRD from a copy of the generated one; the copy
// must be the same file.
const (
	generatedCRD = "manifests/crd/bases/eurekube.io_eurekasyncers.yaml"
	chartCRD     = "charts/eurekube/files/eurekube.io_eurekasyncers.yaml"
)

func TestCRD_TheChartsCopyIsTheGeneratedCRD(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(tools.root, generatedCRD))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(tools.root, chartCRD))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from %s (written by make generate from api/): run\n  cp %s %s\nand commit it", chartCRD, generatedCRD, generatedCRD, chartCRD)
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
