# Exercise 2 answered wrong: step 7 adds into dQaccum with a plain += instead of an atomic add, and
# loses the adds of the other K-block workers of its round. The coursework guide's test turns the
# solution into this answer and expects run and gradcheck to fail it.
s/dQaccum.atomic_add(\(.*\), acc);/dQaccum[\1] += acc;/
