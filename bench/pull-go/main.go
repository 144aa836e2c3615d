// Command pull-go is the Go worker of bench/pull.sh: the Go pull client's normal path (claim,
// then each row's no-op handler in its own transaction with the processed mark) for one source,
// until SIGTERM or SIGINT. It prints "ready" once its pool holds a live connection.
// With -handler batch (bench/pull-batch.sh) it runs the opt-in batch handler instead:
// -concurrency batch workers in this process, each handing a whole claim to one no-op handler in
// one transaction completed by one statement.
// Built by bench/pull.sh in GOPATH mode, like clients/go/test.sh.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	inbox "github.com/alternayte/queuebox/clients/go"
	_ "github.com/jackc/pgx/v4/stdlib" // registers the "pgx" database/sql driver
)

func main() {
	url := flag.String("url", "", "PostgreSQL URL; options=-c search_path=... selects the schema")
	source := flag.String("source", "bench", "the pull source")
	batch := flag.Int("batch", 50, "Options.BatchSize")
	concurrency := flag.Int("concurrency", 1, "Options.MaxConcurrency")
	pollMs := flag.Int("poll-ms", 100, "Options.PollInterval in milliseconds")
	handler := flag.String("handler", "message", "message (NewWorker) or batch (NewBatchWorker, -concurrency workers)")
	flag.Parse()

	db, err := sql.Open("pgx", *url)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// The client's README: at least MaxConcurrency + 2 connections.
	db.SetMaxOpenConns(*concurrency + 2)
	db.SetMaxIdleConns(*concurrency + 2)
	if err := db.Ping(); err != nil {
		log.Fatal(err)
	}
	opts := inbox.Options{
		Source:         *source,
		BatchSize:      *batch,
		MaxConcurrency: *concurrency,
		PollInterval:   time.Duration(*pollMs) * time.Millisecond,
		ShutdownGrace:  5 * time.Second,
	}
	var workers []*inbox.Worker
	if *handler == "batch" {
		for i := 0; i < *concurrency; i++ {
			w, err := inbox.NewBatchWorker(db, opts, func(ctx context.Context, msgs []inbox.Message, tx inbox.Tx) error { return nil })
			if err != nil {
				log.Fatal(err)
			}
			workers = append(workers, w)
		}
	} else {
		w, err := inbox.NewWorker(db, opts, func(ctx context.Context, msg inbox.Message, tx inbox.Tx) error { return nil })
		if err != nil {
			log.Fatal(err)
		}
		workers = append(workers, w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	errs := make(chan error, len(workers))
	for _, w := range workers {
		go func(w *inbox.Worker) { errs <- w.Run(ctx) }(w)
	}
	for range workers {
		if err := <-errs; err != nil {
			log.Fatal(err)
		}
	}
}
