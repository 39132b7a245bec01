-- Sends pre-built raw HTTP requests from REQUESTS_FILE (`<length>\n<bytes>` records written
-- by bench/scenarios.py), each thread taking its own slice, and writes a JSON summary to
-- RESULT_FILE when done.
local counter = 0
local slots = 0  -- paced: time slots delay() has given that no request() has used yet

-- RATE: requests a second, all threads together, at evenly spaced times (an open loop while a
-- connection is free at each time: bench/callbacks.py's paced payments), each request once. Each thread hands out
-- the next time slot of its share to whichever of its connections asks next; a fixed wait after
-- each answer instead would slow the arrivals by the answers' latency and send the connections
-- in step, in bursts.
local rate = tonumber(os.getenv("RATE") or "0")
if rate > 0 then
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } replay_timespec;
    int clock_gettime(int clock_id, replay_timespec *tp);
  ]]
  local now_ts = ffi.new("replay_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, now_ts)  -- CLOCK_MONOTONIC
    return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
  end
  local next_slot = nil
  function delay()
    local now = now_ms()
    local interval = 1000 * nthreads / rate
    if next_slot == nil then next_slot = now + interval * (tid - 1) / nthreads end  -- threads interleaved
    local slot = math.max(next_slot, now)
    next_slot = slot + interval
    slots = slots + 1
    return math.floor(slot - now)
  end
end

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end

function init(args)
  local f = assert(io.open(os.getenv("REQUESTS_FILE"), "rb"))
  local data = f:read("*a")
  f:close()
  requests = {}
  local pos = 1
  while pos <= #data do
    local newline = string.find(data, "\n", pos, true)
    local length = tonumber(string.sub(data, pos, newline - 1))
    requests[#requests + 1] = string.sub(data, newline + 1, newline + length)
    pos = newline + length + 1
  end
  nthreads = tonumber(os.getenv("THREADS"))
  index = tid
  slice = math.floor((#requests - tid) / nthreads) + 1  -- this thread's requests: tid, tid + nthreads, ...
end

function request()
  -- wrk calls request() once in the first thread to check the script, before any connection's
  -- delay(): in a paced run that call must not use up a payment.
  if rate > 0 then
    if slots == 0 then return wrk.format("GET", "/healthz") end
    slots = slots - 1
  end
  if index > #requests then
    -- Paced: each payment once. A connection that asks after this thread's last one gets a
    -- liveness check, not a payment sent twice (refused: paid already), until the thread stops.
    return wrk.format("GET", "/healthz")
  end
  local r = requests[index]
  index = index + nthreads
  if index > #requests and rate == 0 then index = tid end
  return r
end

if rate > 0 then
  local paid = 0
  function response(status, headers, body)
    if string.find(body, "transaction_status", 1, true) then paid = paid + 1 end
    if paid >= slice then wrk.thread:stop() end  -- its last payment answered: the thread is done
  end
end

function done(summary, latency, requests)
  local f = io.open(os.getenv("RESULT_FILE"), "w")
  f:write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "connect_errors": %d, "read_errors": %d, ' ..
    '"write_errors": %d, "timeouts": %d, "p50_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d, "mean_us": %.1f}',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
  f:close()
end
