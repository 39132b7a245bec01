"""One claim / replay / conflict for every money-moving POST (X-Idempotency-Key)."""
