"""The admin console's logic: figures, charts, explanations and operator actions.

Blueprints call these and stay thin; these call the engine (``JobInspector`` to read,
``JobStore`` to act) and write the audit log. Nothing here knows about HTTP.
"""
