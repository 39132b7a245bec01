-- Sends pre-built raw HTTP requests from REQUESTS_FILE (`<length>\n<bytes>` records written
-- by bench/scenarios.py), each thread taking its own slice, and writes a JSON summary to
-- RESULT_FILE when done.
local counter = 0

-- DELAY_MS: each connection waits this long after an answer before its next request, so that
-- connections x 1000 / DELAY_MS requests a second arrive (bench/callbacks.py's paced payments).
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")
if delay_ms > 0 then
  function delay()
    return delay_ms
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
end

function request()
  local r = requests[index]
  index = index + nthreads
  if index > #requests then index = tid end
  return r
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
