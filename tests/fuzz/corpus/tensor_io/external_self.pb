Btej
location	input.npyp