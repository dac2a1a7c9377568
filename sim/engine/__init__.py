"""The SimPy engine: :func:`~sim.engine.simulator.simulate` and
:class:`~sim.engine.simulator.Simulator` (the model is described there).

One simulation is an :class:`~sim.engine.run.EngineRun`; :mod:`~sim.engine.prep` indexes
the graph and the plan, :mod:`~sim.engine.pricing` prices the ops, :mod:`~sim.engine.servers`
holds the streams, links and arrivals, :mod:`~sim.engine.ops` the op handlers and
:mod:`~sim.engine.state` the per-request state.
"""
