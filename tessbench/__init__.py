"""tessbench: compare allocators on real workloads (see tessbench/README.md)."""
