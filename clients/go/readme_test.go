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

// readmeBlock returns the first fenced block of the given language in README.md.
func readmeBlock(t *testing.T, lang string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	// The first block is the complete example; later ones (the SQLite and MySQL/MariaDB
	// section) are fragments of it.
	if len(blocks) == 0 {
		t.Fatalf("README.md has no %s block", lang)
	}
	return blocks[0][1]
}

// TestPullC14_TheReadmeExampleRuns installs the module the way the README says, into a fresh
// application, offline: the README's `go get` commands run as written, with git sending
// https://github.com/alternayte/queuebox to a snapshot of this checkout
// (../install-test/local-remote.sh) and other modules coming from GOPROXY (test.sh's proxy of
// Debian's packages, or the public proxy). The README's example, which is example/main.go, is
// then built and run unchanged against a fresh schema, and stops on SIGINT.
func TestPullC14_TheReadmeExampleRuns(t *testing.T) {
	example := readmeBlock(t, "go")
	source, err := os.ReadFile(filepath.Join("example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if example != string(source) {
		t.Fatal("the README example differs from example/main.go")
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "pull.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), "```go\n"+example+"```") {
		t.Error("docs/pull.md (§10) does not show example/main.go verbatim")
	}
	if testing.Short() {
		t.Skip("-short: not installing the module")
	}
	remote := t.TempDir()
	if out, err := exec.Command("sh", filepath.Join("..", "install-test", "local-remote.sh"), remote).CombinedOutput(); err != nil {
		t.Fatalf("local-remote.sh: %v\n%s", err, out)
	}
	app := t.TempDir()
	const ours = "github.com/alternayte/queuebox"
	env := append(os.Environ(),
		"GIT_CONFIG_GLOBAL="+filepath.Join(remote, "gitconfig"),
		// Our module comes straight from git (the snapshot), never from a proxy or sumdb.
		"GOPRIVATE="+ours, "GONOPROXY="+ours,
		"GONOSUMDB="+strings.Trim(os.Getenv("GONOSUMDB")+","+ours, ","),
		"GOFLAGS=",
	)
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = app, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("go", "mod", "init", "example.com/app")
	installs := 0
	for _, line := range strings.Split(readmeBlock(t, "sh"), "\n") {
		command := strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
		if strings.HasPrefix(command, "go get ") {
			fields := strings.Fields(command)
			run(fields[0], fields[1:]...)
			installs++
		}
	}
	if installs == 0 {
		t.Fatal("the README's sh block has no go get command")
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(app, "example")
	run("go", "build", "-o", bin, ".")

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
