package inbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPullC14_TheReadmeExampleRuns checks that the README's example is exactly example/main.go,
// then builds that program and runs it unchanged against a fresh schema.
func TestPullC14_TheReadmeExampleRuns(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d go blocks, want exactly one complete example", len(blocks))
	}
	example, err := os.ReadFile(filepath.Join("example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if blocks[0][1] != string(example) {
		t.Fatal("the README example differs from example/main.go")
	}
	if testing.Short() {
		t.Skip("-short: not building the example")
	}
	bin := filepath.Join(t.TempDir(), "example")
	build := exec.Command("go", "build", "-o", bin, "./example")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./example: %v\n%s", err, out)
	}
	f := newFixture(t, Schema{})
	id := f.insert(row{source: "orders", payload: `{"order":42}`})
	u := pgURL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+u+sep+"search_path="+f.schema)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck
	waitFor(t, 20*time.Second, "the example to process the row", func() bool { return f.get(id).state == "processed" })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the example exited with %v: %s", err, out.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the example did not stop on SIGINT")
	}
	var note string
	if err := f.db.QueryRow(`SELECT note FROM app_rows WHERE message_id = $1`, id).Scan(&note); err != nil || note != `{"order": 42}` {
		t.Errorf("application row: %q %v", note, err)
	}
}
