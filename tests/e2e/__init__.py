"""Helpers of the end-to-end test (tests/test_e2e_daemon.py): a small project copy, the `evaltrack ui`
process tree, and a GraphQL client for the webserver."""
