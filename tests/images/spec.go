package images

// Spec describes one image: which binary it ships and how it runs.
type Spec struct {
	// Name is the image's name under Repository and the binary's file name
	// (`go build -o bin/` names it after its package's directory).
	Name string
	// Package is the main package the binary is built from.
	Package string
	// Ports the program listens on (EXPOSE), TCP.
	Ports []int
	// Env is the program's default environment.
	Env []string
	// Description is the org.opencontainers.image.description label.
	Description string
	// Links are more names of the binary, each a symbolic link /<link> →
	// the entrypoint: a multi-call binary runs as what it is called.
	Links []string
}

// Entrypoint is where the binary lies in the image: /<name>.
func (s Spec) Entrypoint() string { return "/" + s.Name }

// Ref is the image reference for tag: eurekube/<name>:<tag>.
func (s Spec) Ref(tag string) string { return Repository + "/" + s.Name + ":" + tag }

// Repository prefixes every image name.
const Repository = "eurekube"

// Source is the org.opencontainers.image.source label.
const Source = "https://github.com/eurekube/eurekube"

// User is the numeric user and group every image runs as: distroless's
// "nonroot", so pods pass Pod Security "restricted" (runAsNonRoot).
const User = "65532:65532"

// The images of the project. Ports match the Dockerfile's EXPOSE lines and
// the defaults of each program's flags.
var (
	Registrar = Spec{Name: "registrar", Package: "./cmd/registrar", Ports: []int{9901},
		Description: "Eurekube's sidecar: registers its pod in Netflix Eureka and cancels it when the pod terminates"}
	// Manager is also the eurekube command line, as /eurekube: the Helm
	// chart's pre-delete hook runs `/eurekube uninstall` from this image.
	Manager = Spec{Name: "manager", Package: "./cmd/manager", Ports: []int{9443, 8443, 8081}, Links: []string{"eurekube"},
		Description: "Eurekube's manager: the admission webhook and the EurekaSyncer reconciler (and, as /eurekube, its command line)"}
	// TestApp answers HTTP on LISTEN_ADDR; the image sets it to :8080.
	TestApp = Spec{Name: "testapp", Package: "./tests/testapp", Ports: []int{8080},
		Env: []string{"LISTEN_ADDR=:8080"}, Description: "The app the end-to-end pods run"}
	// Pause is the test node's sandbox image (containerd's sandbox_image).
	Pause = Spec{Name: "pause", Package: "./tests/images/pause",
		Description: "The test node's pod sandbox process"}
)

// All lists every image `make images` writes.
func All() []Spec { return []Spec{Registrar, Manager, TestApp, Pause} }
