"""Infrastructure every room uses: atomic writes (`atomic`) and argument checks (`validate`)."""
