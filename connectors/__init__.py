"""Adapters to the outside: Kafka offsets and transactions, the MySQL sink, the embedded stack."""
