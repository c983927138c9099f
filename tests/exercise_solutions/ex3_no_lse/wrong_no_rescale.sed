# Exercise 3 answered wrong: the stats pass adds each K block's sum into l without rescaling l to
# the new running maximum. The coursework guide's test turns the solution into this answer and
# expects run, gradcheck and lab no-lse to fail it.
s/l\[r\] = std::exp(m\[r\] - m_new) \* l\[r\] + sum;/l[r] = l[r] + sum;/
