from neuron_port.commands.entry import main

main()
