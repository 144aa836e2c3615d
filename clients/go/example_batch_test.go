package inbox_test

// The batch handler example of README.md and docs/pull.md §13, verbatim between the markers
// below; TestBatchHandlerExampleRuns runs it and checks both documents show it.

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	inbox "github.com/alternayte/queuebox/clients/go"
)

// example:begin

// insertEach is a batch handler: one application row per message, all in the one transaction
// that also marks every message processed. An error fails every message of the batch.
func insertEach(ctx context.Context, msgs []inbox.Message, tx inbox.Tx) error {
	for _, m := range msgs {
		_, err := tx.ExecContext(ctx, `INSERT INTO app_rows (message_id, note) VALUES ($1, $2)`, m.ID, m.IdempotencyKey)
		if err != nil {
			return err
		}
	}
	return nil
}

// The worker: up to 100 messages per handler call and per transaction.
func newBatchWorker(db *sql.DB) (*inbox.Worker, error) {
	return inbox.NewBatchWorker(db, inbox.Options{Source: "orders", BatchSize: 100}, insertEach)
}

// example:end

func TestBatchHandlerExampleRuns(t *testing.T) {
	src, err := os.ReadFile("example_batch_test.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	begin, end := strings.Index(text, "// example:begin\n\n"), strings.Index(text, "// example:end")
	snippet := text[begin+len("// example:begin\n\n") : end]
	for _, doc := range []string{"README.md", "../../docs/pull.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "```go\n"+snippet+"```") {
			t.Errorf("%s does not show the batch handler example verbatim", doc)
		}
	}
	db, insert, state, appRows := inbox.PGFixtureForTests(t)
	ids := []string{insert("order-1"), insert("order-2"), insert("order-3")}
	w, err := newBatchWorker(db)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for state(id) != "processed" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if state(id) != "processed" || appRows(id) != 1 {
			t.Errorf("row %s: %s, %d application rows", id, state(id), appRows(id))
		}
	}
}
