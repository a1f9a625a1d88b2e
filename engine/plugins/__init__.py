"""The plugins the engine finds: every registry, what each holds, and whether it is ready to use here."""
