"""Guards: the tracer's sources and the generated Python that checks a cache entry's guards."""
