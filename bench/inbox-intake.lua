-- wrk script of bench/inbox.sh: every request is a unique webhook. Each wrk thread has its own
-- Lua state, so the idempotency key ($.id) is the thread number and a per-thread counter.
-- The body is about 200 bytes of JSON. `done` prints one machine-readable line.

local threads = {}
local next_tid = 0

function setup(thread)
    next_tid = next_tid + 1
    thread:set("tid", next_tid)
    table.insert(threads, thread)
end

local counter = 0
local headers = { ["Content-Type"] = "application/json" }
local pad = string.rep("x", 80)

function request()
    counter = counter + 1
    local body = '{"id":"w' .. tid .. '-' .. counter .. '","type":"bench.webhook",'
        .. '"data":{"seq":' .. counter .. ',"customer":"c' .. (counter % 1000) .. '",'
        .. '"amount":1234,"currency":"EUR","note":"' .. pad .. '"}}'
    return wrk.format("POST", nil, headers, body)
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "wrk-result requests=%d duration_us=%d bytes=%d status_errors=%d connect_errors=%d"
            .. " read_errors=%d write_errors=%d timeouts=%d p50_us=%d p90_us=%d p99_us=%d"
            .. " max_us=%d mean_us=%.1f\n",
        summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read,
        e.write, e.timeout, latency:percentile(50), latency:percentile(90),
        latency:percentile(99), latency.max, latency.mean))
end
