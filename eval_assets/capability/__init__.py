"""The capability track: builds, the track's row shapes, and the track's materializations.

Import the public modules directly (`eval_assets.capability.builds`, `.rows`, `.track`): `builds`
needs only the project configuration, so a command that only registers or lists builds never pays
for the engine, the journal or the warehouse (`evaltrack build add` starts in well under a second).
"""
