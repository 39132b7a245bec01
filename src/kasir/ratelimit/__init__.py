"""Rate limits and lockouts for every route (kasir.ratelimit.service)."""
