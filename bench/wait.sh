# Sourced by the broker benchmark scripts (bench/rabbitmq.sh, nats.sh, kafka.sh): waiting for the
# end of a phase without measuring the wait.
#
# wait_while URL CONDITION [SECONDS]: returns once the SQL boolean CONDITION is false, tested every 0.1 s
# in one database session (a PL/pgSQL loop; READ COMMITTED gives each test a new snapshot).
# A shell loop that starts psql ten times a second cost a process start, a connection and a
# backend each time, on the same 2 cores as the QueueBox it timed and not beside its floors.
# Fails after SECONDS (default 3600), so a QueueBox that died does not hang the script.
wait_while() {
    psql "$1" -qtAX -v ON_ERROR_STOP=1 -c "DO \$wait\$
DECLARE
    deadline timestamptz := clock_timestamp() + ${3:-3600} * INTERVAL '1 second';
BEGIN
    WHILE ($2) LOOP
        IF clock_timestamp() > deadline THEN
            RAISE EXCEPTION 'still waiting after ${3:-3600} s for: %', \$cond\$$2\$cond\$;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
END
\$wait\$" >/dev/null
}
