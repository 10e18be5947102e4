vcl 4.1;
# Varnish in front of the benchmark origin, configured like `coldwire proxy --reverse`:
# cache GET/HEAD by URL; objects without explicit freshness get Varnish's default TTL
# (set on the command line: -p default_ttl=600). The backend port is replaced by
# bench/proxy-vs-peers.sh.
backend origin {
    .host = "127.0.0.1";
    .port = "@ORIGIN_PORT@";
}
