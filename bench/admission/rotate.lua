-- Cycle through the AdmissionReview bodies named after "--" on wrk's command line.
-- An argument "pause=MS" makes each connection wait MS between requests: a paced load
-- below saturation, as an apiserver sends, instead of a closed loop at full speed.
local bodies = {}
local n = 0
local i = 0
local pause = 0

function init(args)
  for _, arg in ipairs(args) do
    local ms = arg:match("^pause=(%d+)$")
    if ms then
      pause = tonumber(ms)
    else
      local f = assert(io.open(arg, "rb"))
      bodies[#bodies + 1] = f:read("*a")
      f:close()
    end
  end
  n = #bodies
end

function delay()
  return pause
end

function request()
  i = i % n + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[i])
end

function response(status, headers, body)
  if status ~= 200 then
    io.stderr:write("unexpected HTTP status " .. status .. "\n")
  end
end
