"""The bug catalog (chaos/bugs/<id>.yaml): its model, loading and matching, in bugs.py."""
