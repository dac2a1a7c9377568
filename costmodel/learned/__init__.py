"""Learned cost models: predictors fitted on a profile, scikit-learn style.

:class:`~costmodel.learned.table.Table` (measured signatures),
:class:`~costmodel.learned.polynomial.Polynomial` and
:class:`~costmodel.learned.xgb.XGBoost` (features in :mod:`~costmodel.learned.xgb_features`)
are predictors; :class:`~costmodel.learned.measured.MeasuredCostModel` wraps one with a
profile's devices, links and dispatch times; :mod:`~costmodel.learned.evaluate` measures
their accuracy leaving one model out.
"""
