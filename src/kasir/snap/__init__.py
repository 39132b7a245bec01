"""The SNAP edge: service codes, mandatory headers, signatures, camelCase schemas."""
