-- wrk script: HTTP/1.1 pipelining for benches/compare.
-- Usage: wrk -t1 -c100 -d5s -s benches/lib/pipeline.lua URL -- DEPTH
-- Each connection sends DEPTH requests back to back and waits for their
-- responses; wrk counts every response, so "requests" stays responses.
local depth = 16
local batch

function init(args)
   depth = tonumber(args[1]) or depth
   local requests = {}
   for i = 1, depth do
      requests[i] = wrk.format()
   end
   batch = table.concat(requests)
end

function request()
   return batch
end
