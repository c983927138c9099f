# Exercise 1 answered wrong: step 3 without D, dS = P ∘ dP. The coursework guide's test turns the
# solution into this answer and expects run and gradcheck to fail it.
s/dS\[j\] = P\[j\] \* (dP\[j\] - D_id)/dS[j] = P[j] * dP[j]/
