package images_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
)

// The Dockerfile stays for Docker users: its stages must give the images
// `make images` builds the same user, entrypoint, binary path and ports.
func TestDockerfile_GivesTheSameShapeAsTheImages(t *testing.T) {
	harness.OnlyComputes(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stages := dockerfileStages(t, filepath.Join(root, "Dockerfile"))
	for _, spec := range []images.Spec{images.Registrar, images.Manager} {
		t.Run(spec.Name, func(t *testing.T) {
			stage, ok := stages[spec.Name]
			if !ok {
				t.Fatalf("Dockerfile has no stage %q", spec.Name)
			}
			var ports []string
			for _, p := range spec.Ports {
				ports = append(ports, fmt.Sprint(p))
			}
			sort.Strings(ports)
			want := map[string]string{
				"USER":       images.User,
				"ENTRYPOINT": fmt.Sprintf(`["%s"]`, spec.Entrypoint()),
				"EXPOSE":     strings.Join(ports, " "),
				"COPY":       "--from=builder /out/" + spec.Name + " " + spec.Entrypoint(),
			}
			for instr, w := range want {
				if got := stage[instr]; got != w {
					t.Errorf("%s %q, want %q", instr, got, w)
				}
			}
		})
	}
}

// dockerfileStages maps each named stage to its instructions' arguments
// (the last of each kind; EXPOSE's ports sorted).
func dockerfileStages(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		instr, args = strings.ToUpper(instr), strings.TrimSpace(args)
		if instr == "FROM" {
			fields := strings.Fields(args)
			cur = map[string]string{}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				stages[fields[2]] = cur
			}
			continue
		}
		if cur == nil {
			continue
		}
		if instr == "EXPOSE" {
			ports := strings.Fields(args)
			sort.Strings(ports)
			args = strings.Join(ports, " ")
		}
		cur[instr] = args
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}
