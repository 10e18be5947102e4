init = function(args)
   local r = {}
   local depth = tonumber(args[1]) or 10
   for i=1,depth do r[i] = wrk.format(nil, args[2] or "/small.html") end
   req = table.concat(r)
end
request = function() return req end
