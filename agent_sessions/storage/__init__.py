"""Storage: the SessionProvider protocol, the ORM provider and the per-database SQL."""
