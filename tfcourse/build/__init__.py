"""`tfcourse build`: release notebooks, solved notebooks and helper modules, all from source/."""
