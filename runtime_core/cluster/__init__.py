"""Scale-out: several ``promptui serve`` nodes share the processes through PostgreSQL.

Each process is owned by exactly one live node through a lease row with a fencing epoch
(leases), nodes register and beat (nodes), every node computes the same fair share (assignment)
and claims, renews and hands over its part (node). Names load on first use (see the stub)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
