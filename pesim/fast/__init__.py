"""pesim's compiled engine (numba): the same PE module, the same events in the same
order, and so the same figures as the simpy engine, at wafer scale."""
