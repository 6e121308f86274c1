-- Cycle through the AdmissionReview bodies named after "--" on wrk's command line.
local bodies = {}
local n = 0
local i = 0

function init(args)
  for _, path in ipairs(args) do
    local f = assert(io.open(path, "rb"))
    bodies[#bodies + 1] = f:read("*a")
    f:close()
  end
  n = #bodies
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
