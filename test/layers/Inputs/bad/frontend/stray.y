%{
/* a .y with no rule: frontend/*.[ch] does not match it */
%}
%%
