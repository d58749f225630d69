"""The coordination seams on Redis: leases with a TTL and a heartbeat, chunk logs on Redis Streams,
and one pub/sub reader per process for stops, freed leases and answers."""
