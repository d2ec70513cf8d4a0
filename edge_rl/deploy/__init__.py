"""Deploying boards: ``edge-rl flash`` (one bundle per board), ``edge-rl credentials`` and
``retire`` (host side), and ``edge-rl doctor`` (the checks a board runs on itself). See
docs/boards.md.
"""
