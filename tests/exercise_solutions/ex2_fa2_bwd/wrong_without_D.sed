# Exercise 2 answered wrong: step 6 without D, dS = P ∘ dP. The coursework guide's test turns the
# solution into this answer and expects run, gradcheck and lab bwd-ratio to fail it.
s/(sdS\[e\] - sD\[e \/ Bc\])/sdS[e]/
