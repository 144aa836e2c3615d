# Sourced by the broker benchmark scripts (bench/rabbitmq.sh, nats.sh, kafka.sh): waiting for the
# end of a phase without measuring the wait.
#
# wait_while URL CONDITION [SECONDS]: returns once the SQL boolean CONDITION is false, tested
# every 0.1 s by one psql session (`\watch`): a shell loop that started psql ten times a second
# paid a process start, a connection and a backend each time, on the same 2 cores as the
# QueueBox it timed and not beside its floors. Each test is its own short transaction. A loop
# inside the database (a DO block) would be one transaction for the whole phase, and its
# snapshot kept every row QueueBox had drained visible to the vacuum horizon: the index
# entries of drained rows could not be marked dead, and a RabbitMQ delivery ran at half its
# rate. The end shows as the division by zero the test turns into once CONDITION is false.
# Fails after SECONDS (default 3600), so a QueueBox that died does not hang the script.
wait_while() {
    local out
    out="$(echo "SELECT 1 / (CASE WHEN ($2) THEN 1 ELSE 0 END) \\watch 0.1" \
        | timeout "${3:-3600}" psql "$1" -qtAX 2>&1)" || true
    if [[ "$out" != *"division by zero"* ]]; then
        echo "wait_while: gave up waiting for the end of: $2 (${3:-3600} s; $(tail -n 1 <<<"$out"))" >&2
        return 1
    fi
}
