-- Locking: a session-level advisory lock, never waited for. Isolation: none (no row is read).
-- Session-level advisory lock (SCH-47): held by this connection until unlock or disconnect;
-- never waits, the caller retries every 500 ms.
SELECT pg_try_advisory_lock(8175552253447532408)
