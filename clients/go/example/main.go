// Command example is the README example: a pull worker whose handler inserts a row.
package main

import (
	"context"
	"database/sql"
	"log"
	"os"
	"os/signal"
	"syscall"

	inbox "github.com/alternayte/queuebox/clients/go"
	_ "github.com/lib/pq" // registers the "postgres" database/sql driver
)

func main() {
	db, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	worker, err := inbox.NewWorker(db, inbox.Options{Source: "orders"},
		func(ctx context.Context, msg inbox.Message, tx inbox.Tx) error {
			// This insert commits together with the inbox row's "processed" mark, or not at all.
			_, err := tx.ExecContext(ctx,
				`INSERT INTO app_rows (message_id, note) VALUES ($1, $2)`,
				msg.ID, string(msg.Payload))
			return err
		})
	if err != nil {
		log.Fatal(err)
	}

	// Ctrl-C or SIGTERM stops the worker gracefully: running handlers get the shutdown grace.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
