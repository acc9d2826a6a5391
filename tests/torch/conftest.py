"""torch-op tests (issue 12): each module skips itself with the reason when torch is absent."""
