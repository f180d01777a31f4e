"""logcount: exactly-once per-minute ERROR counts from Kafka, computed by Spark."""

__version__ = "0.1.0"
