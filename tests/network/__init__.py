"""Network faults (partitions, resets, latency, cuts) injected with toxiproxy."""
