"""The change feed: the durable change log and watching it."""
