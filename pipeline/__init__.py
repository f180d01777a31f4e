"""The Spark stage: the driver loop, the Spark job, the per-minute state."""
