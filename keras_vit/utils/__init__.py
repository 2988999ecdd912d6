"""Infrastructure every subpackage uses: atomic writes (`atomic`), argument checks (`validate`), whether TensorFlow
runs eagerly (`eager`), the XLA compilation cache (`compilation_cache`) and giving the heap's freed pages back
to the OS while a training step compiles (`heap`)."""
